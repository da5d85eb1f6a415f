"""MST and AIM (McKenna et al. 2021, 2022) as dpframe plugins, on private-pgm's ``mbi``."""
