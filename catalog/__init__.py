"""What models exist and how they are described, without any backend
runtime: the registry (models.toml), each backend kind's settings class and
capabilities, GGUF header reading, prompt and FIM templates, secret
resolution. The web process describes models from here; workers build
backends from the same entries."""
