"""The configuration: frozen dataclasses per YAML section, and the one loader that reads YAML
into them with file:line errors."""
