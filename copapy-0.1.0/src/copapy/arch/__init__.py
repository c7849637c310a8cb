"""Architecture knowledge: relocation tables and the generic patch they translate into."""
