"""dpframe_basic: the Laplace and Gaussian mechanisms on bounded mean and covariance queries.

The reference plugin: read it first when writing your own.
"""
