"""This process's identity as a turn owner, and the channel group its lease keeper hears.

The lowest piece of chatrooms.leases: the actions stamp turns with OWNER and the resume
path sends to CONTROL_GROUP without importing the keeper (which imports them back).
"""

from __future__ import annotations

import os
import secrets
import socket

# One id per process life: a restarted process is a new owner (its predecessor's turns are
# interrupted once the old lease expires).
OWNER = f"{socket.gethostname()[:30]}:{os.getpid()}:{secrets.token_hex(4)}"
CONTROL_GROUP = "hal-chat-control"
