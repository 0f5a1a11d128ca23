//! A saga: each completed step declares its undo; an abort runs them in reverse.

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Trip {
    traveller: String,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Booking(String);

mod flights {
    use super::*;
    pub async fn book(trip: Trip) -> Result<Booking, StepError> {
        Ok(Booking(format!("flight for {}", trip.traveller)))
    }
    pub async fn cancel(booking: Booking) -> Result<(), StepError> {
        let _ = booking.0;
        Ok(())
    }
}

mod hotels {
    use super::*;
    pub async fn book(trip: Trip, flight: Booking) -> Result<Booking, StepError> {
        Ok(Booking(format!(
            "hotel for {} after {}",
            trip.traveller, flight.0
        )))
    }
    pub async fn cancel(booking: Booking, flight: Booking) -> Result<(), StepError> {
        let _ = (booking.0, flight.0);
        Ok(())
    }
}

mod payments {
    use super::*;
    pub async fn charge(ctx: &StepContext, hotel: Booking) -> Result<u64, StepError> {
        let _ = (&ctx.idempotency_key, hotel.0);
        Ok(100)
    }
    pub async fn refund(ctx: &StepContext, amount: u64) -> Result<(), StepError> {
        let _ = (&ctx.idempotency_key, amount);
        Ok(())
    }
}

workflow! {
    pub workflow TripBooking(trip: Trip) {
        step book_flight -> Booking {
            action: flights::book(trip),
            compensate: flights::cancel(book_flight),
        }
        step book_hotel -> Booking {
            action: hotels::book(trip, book_flight),
            compensate: hotels::cancel(book_hotel, book_flight),
        }
        step charge_card -> u64 {
            action: payments::charge(ctx, book_hotel),
            effect: external,
            idempotent: true,
            retry: { max_attempts: 5, initial: 200ms, max: 5s },
            compensate: payments::refund(ctx, charge_card),
        }
    }
}

fn main() {
    let _ = TripBooking::MERMAID;
}
