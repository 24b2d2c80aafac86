"""The foundations every layer may use: seeding, typed settings, paths, shape annotations, the figure style."""
