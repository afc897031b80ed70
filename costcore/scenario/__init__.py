"""What a scenario is and how it gets in: the schema (vector layout, ranges, defaults), YAML
reading, loaders, share links and argument checks. Light: no numba, no pandas.
"""
