"""HAL's node agent: enrols, heartbeats with metrics, and runs a fixed set of operations.

Standard library + psutil only (no Django), so it runs on any server of the fleet.
"""

AGENT_VERSION = "0.3.0"
