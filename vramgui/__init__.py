"""vramgui: will this model fit on my GPU, and how?"""

__version__ = "0.1.0"
