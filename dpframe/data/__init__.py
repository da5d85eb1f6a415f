"""Small public datasets bundled with dpframe (see README.md in this folder)."""
