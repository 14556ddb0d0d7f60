"""The private token only the seam holds; sealed constructors refuse anything else."""

from __future__ import annotations

from typing import Final

SEAL: Final = object()
