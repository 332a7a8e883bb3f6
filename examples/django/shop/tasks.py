"""The shop's tasks: imported at start by tickwork's Django app (each installed app's
``tasks`` module)."""

from tickwork.contrib.django import app

from .models import Order


@app.task(max_attempts=5)
def send_receipt(order_id: int) -> str:
    order = Order.objects.get(id=order_id)  # the ORM, in the worker's thread
    # ... send the e-mail ...
    Order.objects.filter(id=order.id).update(receipt_sent=True)
    return f"receipt sent to {order.email}"
