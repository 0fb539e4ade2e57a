"""Well-known architectures written once against a framework module `fw` (torch or dualflow)."""
