"""The App ``tickwork reactors ... --app signals_app:app`` loads in the CLI signals tests:
one reactor that handles ORDER_PAID and sweeps, next to the framework's retention."""

from __future__ import annotations

from tickwork import App
from tickwork.signals import Reactor, ReactorContext, Signal

app = App()


class OrderPaid(Reactor):
    """Does nothing: the tests only look at how the command line shows it."""

    name = "order_paid"
    handles = frozenset({"ORDER_PAID"})
    sweep_cron = "*/5 * * * *"

    async def handle_signal(self, signal: Signal, ctx: ReactorContext) -> None:
        return None

    async def sweep(self, ctx: ReactorContext) -> None:
        return None


app.add_reactor(OrderPaid())
