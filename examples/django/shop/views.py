import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .models import Order
from .tasks import send_receipt


@csrf_exempt  # an example API; keep Django's CSRF protection for forms
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    body = json.loads(request.body)
    with transaction.atomic():
        order = Order.objects.create(email=body["email"], total_cents=body["total_cents"])
        # the job is stored in this transaction: if anything below fails, there is no
        # order and no receipt to send
        job = send_receipt.defer(order_id=order.id)
    return JsonResponse({"order": order.id, "job": job.id}, status=201)
