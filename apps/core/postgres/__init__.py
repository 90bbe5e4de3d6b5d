"""Django's PostgreSQL backend with a cheaper check of a reused connection, and statements
prepared when asked (`base`)."""
