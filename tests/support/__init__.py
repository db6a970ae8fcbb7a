"""Test helpers that stand in for the world outside opsbot: real servers, scripted answers."""
