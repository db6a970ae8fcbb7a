"""Drivers that run *inside* the bench container with opsbot's Python (stdlib and opsbot
only). Each prints one JSON object as its last line of output."""
