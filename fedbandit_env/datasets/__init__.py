"""Loaders that turn user-supplied data files into bandit instances (nothing is downloaded)."""
