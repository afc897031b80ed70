"""The command line: ``python -m costcore`` or ``costcore`` (main: estimate and presets;
validate_levers: the validate and levers subcommands).
"""
