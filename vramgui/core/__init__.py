"""The estimation core: standard library only, no Qt, no network, no NVML, no disk I/O."""
