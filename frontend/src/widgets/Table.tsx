// The tables of the pages and settings sections: each scrolls sideways on its own on a narrow
// screen and, unless told otherwise, stacks each row into a card on a phone (`.table.stack` in
// styles.css); its header is named once here.
import type { ComponentChildren } from 'preact';

export function Table({
  caption,
  columns,
  actions = false,
  stack = true,
  scroll = false,
  footer,
  children,
}: {
  /** Read out by screen readers only. */
  caption?: string;
  columns: readonly ComponentChildren[];
  /** A last, unnamed column holds each row's buttons. */
  actions?: boolean;
  /** Rows become cards on a phone (their cells need a `data-label`). */
  stack?: boolean;
  /** A long table scrolls within a fixed height (`.table-scroll`). */
  scroll?: boolean;
  /** Rows of totals, after the others. */
  footer?: ComponentChildren;
  /** The rows. */
  children: ComponentChildren;
}) {
  return (
    <div class={scroll ? 'table-wrap table-scroll' : 'table-wrap'}>
      <table class={stack ? 'table stack' : 'table'}>
        {caption && <caption class="sr-only">{caption}</caption>}
        <thead>
          <tr>
            {columns.map((column, index) => (
              <th key={index} scope="col">
                {column}
              </th>
            ))}
            {actions && (
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>{children}</tbody>
        {footer && <tfoot>{footer}</tfoot>}
      </table>
    </div>
  );
}
