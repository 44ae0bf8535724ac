"""Clients of outside services that several components share: the OpenAI-compatible endpoint
client (`llm_client`: generation with backend=openai, the extraction LLM, the LLM judge) and the
verified on-disk record caches behind it and KGGen (`disk_cache`). The lowest of the components:
it imports nothing of them.
"""
