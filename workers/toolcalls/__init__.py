"""Tool calling by emulation, for models without native tool support: tools
are described in the prompt, and calls are parsed out of the reply text."""
