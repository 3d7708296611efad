"""vLLM's start-up, by concern: version rules, KV layout, profile run, vision encoders, start-up."""
