"""dpframe-histogram: a DP histogram over public bins and the DP mode bin, an example plugin
distribution written against dpframe's public API only (see README.md)."""
