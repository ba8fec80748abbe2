"""The optional nginx front of ``trainyard server`` (``--front nginx``)."""
