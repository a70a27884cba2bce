"""Domain logic behind the routes. Services only ``flush()``: the request's session commits once."""
