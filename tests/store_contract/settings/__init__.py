"""The settings port (``SettingStore``)."""
