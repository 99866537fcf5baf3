"""The support modules that no user runs and the main job needs: one concern each, imported by the
scripts at the top level (and by lab/), importing model.py and each other but never a script or lab/."""
