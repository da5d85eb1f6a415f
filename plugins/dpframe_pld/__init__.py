"""dpframe-pld: a privacy-loss-distribution accountant wrapping Google's dp-accounting."""
