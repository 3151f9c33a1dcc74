"""OptionError: a bad option value, whose message names the option so start-up can stop with it."""


class OptionError(ValueError):
    """A bad option value; the message names the option, so start-up can stop with it."""
