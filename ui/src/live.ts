// How often live views ask again (milliseconds): the fallback until the event stream
// tells them when something changed.
export const LIVE = 3000;
