/** A page that fails to render shows the failure in place, never a blank console. */
import { Component } from 'react';
import type { ReactNode } from 'react';

export class ErrorBoundary extends Component<{ children: ReactNode }, { error: Error | null }> {
  override state = { error: null as Error | null };

  static getDerivedStateFromError(error: Error) {
    return { error };
  }

  override render() {
    if (this.state.error) {
      return (
        <div className="error" role="alert" data-testid="render-error">
          <strong>This page failed to render.</strong> {this.state.error.message}
        </div>
      );
    }
    return this.props.children;
  }
}
