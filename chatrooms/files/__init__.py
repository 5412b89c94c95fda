"""Chat attachments: what a file is (sniffing, limits), storing it, and sending it."""
