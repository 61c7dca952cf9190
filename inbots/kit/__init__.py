"""Small framework-free helpers: ids and tokens, time, text cutting, pagination."""
