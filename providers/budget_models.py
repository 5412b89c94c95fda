"""Token usage per connection, day and model; prices per million tokens; budgets per connection."""

from __future__ import annotations

from django.db import models


class ModelPrice(models.Model):
    """The price of one model of one connection, per million input and output tokens."""

    connection = models.ForeignKey(
        "providers.AIConnection", on_delete=models.CASCADE, related_name="prices"
    )
    model = models.CharField(max_length=200)
    input_per_million = models.DecimalField(max_digits=12, decimal_places=4)
    output_per_million = models.DecimalField(max_digits=12, decimal_places=4)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["connection_id", "model"]
        constraints = [
            models.UniqueConstraint(fields=["connection", "model"], name="providers_price_model")
        ]

    def __str__(self) -> str:
        return f"price of {self.model} on connection {self.connection_id}"


class UsageDay(models.Model):
    """One connection's tokens (and cost, when priced) for one model in one UTC day.

    The aggregate the budgets read: updated in place (F() increments) per model call, so a
    day or a month is a range scan of the (connection, day, model) unique index."""

    connection = models.ForeignKey(
        "providers.AIConnection", on_delete=models.CASCADE, related_name="usage_days"
    )
    day = models.DateField()
    model = models.CharField(max_length=200, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    # Priced at the time of the call (a later price change does not rewrite history).
    cost = models.DecimalField(max_digits=18, decimal_places=6, default=0)
    calls = models.IntegerField(default=0)

    class Meta:
        ordering = ["-day", "connection_id", "model"]
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "day", "model"], name="providers_usage_day_model"
            )
        ]

    def __str__(self) -> str:
        return f"usage of connection {self.connection_id} on {self.day} ({self.model})"


class ConnectionBudget(models.Model):
    """Daily and monthly token/cost budgets of a connection, and why it is paused (if it is)."""

    connection = models.OneToOneField(
        "providers.AIConnection", on_delete=models.CASCADE, related_name="budget"
    )
    tokens_per_day = models.BigIntegerField(null=True, blank=True)
    tokens_per_month = models.BigIntegerField(null=True, blank=True)
    cost_per_day = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    cost_per_month = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    # The period whose 80 % notice went out (once per period).
    warned_day = models.DateField(null=True, blank=True)
    warned_month = models.DateField(null=True, blank=True)
    paused_reason = models.CharField(max_length=300, blank=True)
    # When the exhausted period ends; indexed for the lazy resume at send time.
    paused_until = models.DateTimeField(null=True, blank=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["connection_id"]

    def __str__(self) -> str:
        return f"budget of connection {self.connection_id}"


class UsageReservation(models.Model):
    """Tokens (and cost) one model call holds against its connection's budget in flight.

    Written with the call's turn in the transaction that checked the remaining budget;
    deleted when its real usage is charged (providers/reservations.py). `expires_at`
    bounds a reservation whose process died: past it, it no longer counts."""

    connection = models.ForeignKey(
        "providers.AIConnection", on_delete=models.CASCADE, related_name="reservations"
    )
    # The chat turn (or reviewer run) holding it: an id, not a key (chatrooms sits above).
    turn_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    tokens = models.BigIntegerField()
    cost = models.DecimalField(max_digits=18, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["connection_id", "id"]
        indexes = [
            models.Index(fields=["connection", "expires_at"], name="providers_reserve_live"),
        ]

    def __str__(self) -> str:
        return f"{self.tokens} tokens reserved on connection {self.connection_id}"
