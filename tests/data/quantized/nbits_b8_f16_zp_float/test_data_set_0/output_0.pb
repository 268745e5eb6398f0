
BYJ$…Q¯ˆÉ¸ÉBÐ¡DNÍŽA5LÁMCJöË\M®E5Ì]ÎMÐHE