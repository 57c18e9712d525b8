/** A usage error: wrong arguments. main prints it with the command's usage line and exits 2. */
export class UsageError extends Error {
  readonly code = 'USAGE';
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
