"""The gateway to the LLM: the only package that talks to a model server (see `gateway`)."""
