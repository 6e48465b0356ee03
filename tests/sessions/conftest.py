"""Session fixtures live in tests/conftest.py (the browser tests share them)."""
