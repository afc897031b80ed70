"""The one exception type of the public API.

Every bad input to every public function of :mod:`costcore` (a scenario, a
preset name, a YAML file or upload, a share link, a sweep's values, a sample
count...) raises :class:`ScenarioError`, and nothing else. Its text is one
plain sentence that names the field and, where there is one, the allowed
range; the same facts are attributes for programs:

``field`` (also ``path``)
    the dotted setting or argument name, e.g. ``"model.params_b"`` or ``"n"``;
``value``
    the offending value (``None`` when it is not known or not printable);
``allowed``
    the allowed range in words, e.g. ``"a number from 0.01 to 10,000 B"``
    (``""`` when the problem is not a range).

This module imports nothing heavy, so the CLI can refuse bad input before
numba and pandas load.
"""
from __future__ import annotations


class ScenarioError(ValueError):
    """Bad input. ``str(err)`` is one plain sentence naming the field."""

    def __init__(self, path: str, message: str, *, value=None, allowed: str = ""):
        self.path = path
        self.field = path
        self.value = value
        self.allowed = allowed
        super().__init__(f"{path}: {message}" if path else message)

    def __reduce__(self):  # picklable across processes with its attributes
        return (_rebuild, (self.path, str(self), self.value, self.allowed))


def _rebuild(path, text, value, allowed):
    err = ScenarioError.__new__(ScenarioError)
    ValueError.__init__(err, text)
    err.path = err.field = path
    err.value, err.allowed = value, allowed
    return err
