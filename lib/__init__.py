"""The support modules that no user runs: one concern each, imported by the scripts at the top
level, importing model.py and each other but never a script."""
