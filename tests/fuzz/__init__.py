"""Coverage-guided fuzzing of the router's decoders: ``python -m tests.fuzz``."""
