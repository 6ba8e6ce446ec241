"""Layer cli: the `motioncore` command (main.py; the subcommand modules beside it never import main). May import every layer."""
