"""AI model providers: Anthropic, OpenAI-compatible, local CLI, OAuth."""
