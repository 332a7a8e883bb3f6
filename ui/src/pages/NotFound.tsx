import { Link } from "react-router";

export function NotFoundPage() {
  return (
    <section>
      <h1>No such page</h1>
      <p>
        This address is not a page of the dashboard. Go to the <Link to="/">overview</Link>.
      </p>
    </section>
  );
}
