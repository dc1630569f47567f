"""The version of ptkit without its variant label (the wheel adds ``+<variant>``)."""

BASE_VERSION = "0.1.0"
