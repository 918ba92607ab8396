// Example notification service extension: the seeds' image download (the class is in
// Examples/ServiceExtensions, shared with Examples/SampleService).
import ExampleServiceExtensions
import UserNotifications

UNNotificationServiceExtensionMain(ImageDownloadService.self)
