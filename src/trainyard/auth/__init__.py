"""Who may use the API: tokens, kept only as hashes."""
