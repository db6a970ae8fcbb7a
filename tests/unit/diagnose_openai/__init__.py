"""Tests of the OpenAI-compatible policy, its settings, and the scripted server they use."""
