"""Serving trained models: the services layer runs them (services/serving.py); the built-in model server lives here."""
